package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/bench"
	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
)

// The default config keeps the exporter's queue on disk (file_storage in SVC_STORAGE_DIR). Disk
// trouble must be loud: a directory that cannot be written fails the start with a message that
// names it, and a full storage turns clients away with a retryable answer instead of dropping
// what was acknowledged.

// mountTmpfs mounts a tmpfs of the given size (and options) on a new directory, or skips the
// case when this machine does not let the test mount (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size string, readOnly bool) string {
	t.Helper()
	dir := t.TempDir()
	opts := "size=" + size
	if readOnly {
		opts += ",ro"
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

// TestUnwritableStorageFailsStart: the collector with the default config does not start on a
// storage directory it cannot create or write, and says which directory and why.
func TestUnwritableStorageFailsStart(t *testing.T) {
	bin := collectorBinary(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{name: "path through a file", dir: func(*testing.T) string { return filepath.Join(file, "storage") },
			want: []string{"file_storage", "not a directory"}},
		{name: "read-only file system", dir: func(t *testing.T) string { return mountTmpfs(t, "1m", true) },
			want: []string{`failed to start "svc" exporter`, "read-only file system"}},
		{name: "missing directory on a read-only file system", dir: func(t *testing.T) string { return filepath.Join(mountTmpfs(t, "1m", true), "svc") },
			want: []string{`failed to create extension "file_storage"`, "read-only file system"}},
	}
	p := startPlatform(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			ports, err := collector.FreePorts(4)
			if err != nil {
				t.Fatal(err)
			}
			opts := gatewayOptions{platform: p}.collectorOptions(t, p)
			env := append(opts.Env, "SVC_STORAGE_DIR="+dir, "SVC_METRICS_HOST=127.0.0.1",
				"SVC_OTLP_GRPC_ENDPOINT=127.0.0.1:"+strconv.Itoa(ports[0]), "SVC_OTLP_HTTP_ENDPOINT=127.0.0.1:"+strconv.Itoa(ports[1]),
				"SVC_HEALTH_ENDPOINT=127.0.0.1:"+strconv.Itoa(ports[2]), "SVC_METRICS_PORT="+strconv.Itoa(ports[3]))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := collector.Run(ctx, bin, env, "--config", collector.DefaultConfig())
			if ctx.Err() != nil {
				t.Fatalf("the collector kept running on storage %s", dir)
			}
			if err == nil {
				t.Fatalf("the collector exited without error on storage %s:\n%s", dir, out)
			}
			last := lastLine(out)
			t.Logf("start failure: %s", last)
			for _, want := range append(tt.want, dir) {
				if !strings.Contains(last, want) {
					t.Errorf("the error does not say %q: %s", want, last)
				}
			}
		})
	}
}

// lastLine is the last non-empty line of the output: the collector's `Error: ...`.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// TestFaultStorageFull: the platform is down, so the exporter's queue on disk fills. When the
// queue's own limit binds first (sizer: bytes, below the storage's room), the collector turns
// the sender away with a retryable answer (HTTP 503) instead of accepting and dropping, keeps
// running, and delivers everything it accepted once the platform is back: on an ordinary
// directory and on a small disk (a tmpfs).
//
// When the storage itself fills first (file_storage's max_size, or a full disk), exporterhelper
// v0.164 also answers 503 to new data, but loses items already queued: taking an item out of the
// queue writes the queue's index, that write fails, and the item is skipped ("Error deleting item
// from queue"): 150 of 375 accepted spans with max_size 2 MiB, 75 of 225 on a full 2 MiB tmpfs,
// in runs of this test. That case runs with SVC_FAULTS_STORAGE_FULL=1 and fails until upstream
// fixes it; distribution/examples/README.md tells users to bound the queue in bytes below the
// disk's room.
func TestFaultStorageFull(t *testing.T) {
	queueBytes := []string{"exporters::svc::sending_queue::sizer=bytes", "exporters::svc::sending_queue::queue_size=1048576"}
	tests := []struct {
		name     string
		opts     func(t *testing.T) bench.RigOptions
		upstream bool
	}{
		{name: "queue limit", opts: func(*testing.T) bench.RigOptions {
			return bench.RigOptions{Sets: queueBytes}
		}},
		{name: "queue limit on a small disk", opts: func(t *testing.T) bench.RigOptions {
			return bench.RigOptions{Sets: queueBytes, StorageDir: mountTmpfs(t, "8m", false)}
		}},
		{name: "storage max_size", upstream: true, opts: func(*testing.T) bench.RigOptions {
			return bench.RigOptions{Sets: []string{"extensions::file_storage::max_size=2097152"}}
		}},
		{name: "full disk", upstream: true, opts: func(t *testing.T) bench.RigOptions {
			return bench.RigOptions{StorageDir: mountTmpfs(t, "2m", false)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.upstream && os.Getenv("SVC_FAULTS_STORAGE_FULL") != "1" {
				t.Skip("loses queued items in exporterhelper v0.164 (see the test's comment); SVC_FAULTS_STORAGE_FULL=1 runs it")
			}
			rig := startFaultRig(t, tt.opts(t))
			w := faultWorkload(t, loadgen.WorkloadOptions{})
			if err := rig.Platform.SetDown(platform.DownRefuse); err != nil {
				t.Fatal(err)
			}
			res := sendLoad(t, rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 1000, Duration: longer(6*time.Second, 20*time.Second), RequestSpans: 256, Concurrency: 2})
			t.Logf("answers while the storage was full: %v", res.Statuses)
			if res.Refused.Requests == 0 {
				t.Errorf("the sender was never turned away: the storage did not fill, or the collector accepted what it could not keep: %v", res.Statuses)
			}
			if res.Statuses[strconv.Itoa(http.StatusServiceUnavailable)] == 0 {
				t.Errorf("no 503 among the answers: %v", res.Statuses)
			}
			if res.Rejected.Requests+res.Failed.Requests != 0 {
				t.Errorf("answers other than success and retryable refusal: %v", res.Statuses)
			}
			select {
			case <-rig.Collector.Exited():
				t.Fatal("the collector exited")
			default:
			}
			if err := rig.Platform.SetDown(platform.Up); err != nil {
				t.Fatal(err)
			}
			a := settleAndReport(t, "storage-full-"+strings.ReplaceAll(tt.name, " ", "-"), rig, w, 2*time.Minute, res)
			requireNoLoss(t, a, true)
		})
	}
}
