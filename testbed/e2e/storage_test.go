package e2e

import (
	"context"
	"fmt"
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

// The default config keeps the exporter's queue on disk (svc_file_storage in SVC_STORAGE_DIR). Disk
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
			want: []string{"svc_file_storage", "not a directory"}},
		{name: "read-only file system", dir: func(t *testing.T) string { return mountTmpfs(t, "1m", true) },
			// The storage directory is locked before any pipeline starts (one instance per directory).
			want: []string{"failed to start extensions: svc_file_storage directory", "cannot create its lock file", "read-only file system"}},
		{name: "missing directory on a read-only file system", dir: func(t *testing.T) string { return filepath.Join(mountTmpfs(t, "1m", true), "svc") },
			want: []string{`failed to create extension "svc_file_storage"`, "read-only file system"}},
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

// TestFaultStorageFull: the platform is down, so the exporter's queues on disk fill. With the
// shipped queue settings (distribution/config.yaml: sizer bytes, queue_size SVC_QUEUE_BYTES,
// scaled down here from 1 GiB to a quarter of the storage, the share
// distribution/kubernetes/k8s_test.go asks of the volume claims) the queues' own limit binds
// before the storage is full: the collector turns the sender away with a retryable answer (HTTP
// 503) instead of accepting and dropping, keeps running, and delivers everything it accepted once
// the platform is back. On an ordinary directory, on a storage limited by svc_file_storage's
// max_size, and on a small disk (a tmpfs, where the machine lets the test mount one).
//
// The collector's log shows that the storage never filled.
//
// The same storage limits with the shipped 1 GiB bound, where the storage fills first:
// exporterhelper v0.164 also answers 503 to new data, but can lose items already queued: taking
// an item out of the queue first writes the queue's index, and when that write fails on the full
// storage the item is skipped ("Error deleting item from queue"; persistentQueue.getNextItem).
// Whether a run hits it depends on when the consumers read: runs of this test lost 150 of 375
// accepted spans (max_size 2 MiB) and 75 of 225 (a full 2 MiB tmpfs) when the queue stored spans
// uncompressed; with the gzip span batches of today and this load a run may lose none. Those
// cases run with SVC_FAULTS_STORAGE_FULL=1 only; distribution/examples/README.md tells users to
// keep the queues' bound below the disk's room.
func TestFaultStorageFull(t *testing.T) {
	const storageBytes = 1 << 20
	shippedQueue := []string{"SVC_QUEUE_BYTES=" + strconv.Itoa(storageBytes/4)}
	storageMaxSize := []string{"extensions::svc_file_storage::max_size=" + strconv.Itoa(storageBytes)}
	smallDisk := strconv.Itoa(storageBytes>>20) + "m"
	tests := []struct {
		name     string
		env      []string // the collector's environment, added to the default config's
		opts     func(t *testing.T) bench.RigOptions
		upstream bool
	}{
		{name: "queue limit", env: shippedQueue, opts: func(*testing.T) bench.RigOptions {
			return bench.RigOptions{}
		}},
		{name: "queue limit below the storage's max_size", env: shippedQueue, opts: func(*testing.T) bench.RigOptions {
			return bench.RigOptions{Sets: storageMaxSize}
		}},
		{name: "queue limit on a small disk", env: shippedQueue, opts: func(t *testing.T) bench.RigOptions {
			return bench.RigOptions{StorageDir: mountTmpfs(t, smallDisk, false)}
		}},
		{name: "storage max_size", upstream: true, opts: func(*testing.T) bench.RigOptions {
			return bench.RigOptions{Sets: storageMaxSize}
		}},
		{name: "full disk", upstream: true, opts: func(t *testing.T) bench.RigOptions {
			return bench.RigOptions{StorageDir: mountTmpfs(t, smallDisk, false)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.upstream && os.Getenv("SVC_FAULTS_STORAGE_FULL") != "1" {
				t.Skip("loses queued items in exporterhelper v0.164 (see the test's comment); SVC_FAULTS_STORAGE_FULL=1 runs it")
			}
			build := bench.Gateway(collectorBinary(t))
			build.Env = append(build.Env, tt.env...)
			rig := startFaultRigOf(t, build, tt.opts(t))
			w := faultWorkload(t, loadgen.WorkloadOptions{})
			if err := rig.Platform.SetDown(platform.DownRefuse); err != nil {
				t.Fatal(err)
			}
			// Requests of 64 spans: a few fit in the scaled-down queue (some are accepted).
			res := sendLoad(t, rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 1000, Duration: longer(10*time.Second, 20*time.Second), RequestSpans: 64, Concurrency: 2})
			t.Logf("answers while the storage was full: %v; storage files: %s", res.Statuses, storageFiles(t, rig.StorageDir))
			if res.Accepted.Spans == 0 {
				t.Errorf("nothing was accepted: %v", res.Statuses)
			}
			full := storageFullLines(rig)
			t.Logf("collector log lines of a full storage: %d", full)
			if !tt.upstream && full != 0 {
				t.Errorf("the storage filled (%d log lines): the queues' limit did not bind first", full)
			}
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

// storageFullLines counts the collector's log lines that say a write found the storage full:
// svc_file_storage's max_size (storage.ErrStorageFull) or a full disk.
func storageFullLines(rig *bench.Rig) int {
	return rig.Collector.CountLines("the storage extension has run out of available space") +
		rig.Collector.CountLines("no space left on device")
}

// storageFiles lists the files of a storage directory with their sizes, for the test's log.
func storageFiles(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var files []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			files = append(files, fmt.Sprintf("%s %d KiB", e.Name(), info.Size()>>10))
		}
	}
	return strings.Join(files, ", ")
}
