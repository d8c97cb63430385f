package kubernetes

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The exporters' queues on disk are bounded in bytes, below the room of their storage: when the
// storage fills before the queue's own limit, exporterhelper v0.164's persistent queue loses items
// it already acknowledged (testbed/e2e TestFaultStorageFull). A bound in items does not say how
// much disk a queue takes, so every config we ship bounds its queues in bytes, from one setting.

// shippedQueueSize is the queue_size of every exporter queue we ship: SVC_QUEUE_BYTES, 1 GiB when
// unset.
const shippedQueueSize = "${env:SVC_QUEUE_BYTES:-1073741824}"

// queueShareOfVolume: each queue may take at most this share of its volume. A config has two
// queues (spans, scores or log records), the storage file grows past what it holds (bbolt keeps
// freed pages in the file), and the gateway's span filter keeps its held spans on the same volume.
const queueShareOfVolume = 4

// minQueueBytes: exporterhelper v0.164's persistent queue refuses an item larger than its whole
// bound as full, forever; the bound must stay far above the largest request (svcexporter README).
const minQueueBytes = 256 << 20

// queuesOf is how many queues an exporter has: one per signal of the pipelines that use it.
func queuesOf(cfg map[string]any, exporter string) int {
	signals := map[string]bool{}
	service, _ := cfg["service"].(map[string]any)
	pipelines, _ := service["pipelines"].(map[string]any)
	for id, p := range pipelines {
		p, _ := p.(map[string]any)
		exporters, _ := p["exporters"].([]any)
		if slices.Contains(exporters, any(exporter)) {
			signal, _, _ := strings.Cut(id, "/")
			signals[signal] = true
		}
	}
	return len(signals)
}

// exporterQueues returns the sending_queue of each exporter of a parsed config that has one, by
// exporter name.
func exporterQueues(cfg map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	exporters, _ := cfg["exporters"].(map[string]any)
	for name, e := range exporters {
		e, _ := e.(map[string]any)
		if q, ok := e["sending_queue"].(map[string]any); ok {
			out[name] = q
		}
	}
	return out
}

var envWithDefault = regexp.MustCompile(`^\$\{env:([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}$`)

// resolveQueueSize is the queue_size the collector would use: a number, or ${env:NAME:-DEFAULT}
// with the value env gives NAME, or DEFAULT when it gives none.
func resolveQueueSize(v any, env func(string) string) (int64, error) {
	switch v := v.(type) {
	case float64: // sigs.k8s.io/yaml decodes numbers as JSON does
		return int64(v), nil
	case string:
		m := envWithDefault.FindStringSubmatch(v)
		if m == nil {
			return strconv.ParseInt(v, 10, 64)
		}
		if s := env(m[1]); s != "" {
			return strconv.ParseInt(s, 10, 64)
		}
		return strconv.ParseInt(m[2], 10, 64)
	}
	return 0, fmt.Errorf("queue_size %v (%T): neither a number nor ${env:NAME:-DEFAULT}", v, v)
}

// TestShippedQueuesAreBoundedInBytes: the default config, every example and the bench peers
// (which must have build A's queue) bound every enabled exporter queue in bytes, with
// shippedQueueSize.
func TestShippedQueuesAreBoundedInBytes(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../config.yaml", "../examples/*.yaml", "../examples/*/*.yaml", "../../testbed/peer/*-config.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	persistent := 0
	for _, file := range files {
		t.Run(filepath.ToSlash(file), func(t *testing.T) {
			for name, q := range exporterQueues(parseYAML(t, readFile(t, file))) {
				if q["enabled"] == false {
					continue
				}
				if q["storage"] != nil {
					persistent++
				}
				if q["sizer"] != "bytes" || q["queue_size"] != shippedQueueSize {
					t.Errorf("exporter %s: sending_queue sizer %v, queue_size %v; want bytes, %s", name, q["sizer"], q["queue_size"], shippedQueueSize)
				}
				if size, err := resolveQueueSize(q["queue_size"], func(string) string { return "" }); err != nil || size != 1<<30 {
					t.Errorf("exporter %s: default queue_size %d (%v), want 1 GiB", name, size, err)
				}
			}
		})
	}
	if persistent < 5 {
		t.Errorf("%d queues on disk in %d files: the globs missed the configs", persistent, len(files))
	}
}

func TestResolveQueueSize(t *testing.T) {
	env := map[string]string{"SVC_QUEUE_BYTES": "2048"}
	tests := []struct {
		name    string
		v       any
		env     map[string]string
		want    int64
		wantErr bool
	}{
		{name: "number", v: float64(4096), want: 4096},
		{name: "default", v: shippedQueueSize, want: 1 << 30},
		{name: "from the environment", v: shippedQueueSize, env: env, want: 2048},
		{name: "not a number", v: "${env:SVC_QUEUE_BYTES:-1GiB}", wantErr: true},
		{name: "no default, unset", v: "${env:SVC_QUEUE_BYTES}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveQueueSize(tt.v, func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("resolveQueueSize(%v) = %d, %v; want %d, error %v", tt.v, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// checkQueueFitsVolume: each exporter queue of a pod's config that is on disk is bounded in bytes,
// with the pod's environment, to at most 1/queueShareOfVolume of the volume claim it is stored on,
// all of them together (one queue per signal) to at most half of it, none below minQueueBytes.
func checkQueueFitsVolume(t *testing.T, cfg map[string]any, c corev1.Container, claims []corev1.PersistentVolumeClaim, claimName string) {
	t.Helper()
	i := slices.IndexFunc(claims, func(p corev1.PersistentVolumeClaim) bool { return p.Name == claimName })
	if i < 0 {
		return // checkPods reports it
	}
	volume := claims[i].Spec.Resources.Requests[corev1.ResourceStorage]
	found := false
	var total int64
	for name, q := range exporterQueues(cfg) {
		if q["storage"] == nil || q["enabled"] == false {
			continue
		}
		found = true
		if q["sizer"] != "bytes" {
			t.Errorf("exporter %s: queue on the volume bounded by sizer %v, not bytes: how much of the volume it takes is unbounded", name, q["sizer"])
			continue
		}
		size, err := resolveQueueSize(q["queue_size"], func(k string) string { return envValue(c, k) })
		if err != nil {
			t.Errorf("exporter %s: %v", name, err)
			continue
		}
		if most := resource.NewQuantity(size*queueShareOfVolume, resource.BinarySI); most.Cmp(volume) > 0 {
			t.Errorf("exporter %s: queue of %d bytes on a volume of %s: want at most 1/%d of it (a claim of %s at least)", name, size, volume.String(), queueShareOfVolume, most.String())
		}
		if size < minQueueBytes {
			t.Errorf("exporter %s: queue of %d bytes: below %d, a large request could never be queued", name, size, minQueueBytes)
		}
		total += size * int64(queuesOf(cfg, name))
	}
	if !found {
		t.Error("no exporter queue on the volume")
	}
	if most := resource.NewQuantity(2*total, resource.BinarySI); most.Cmp(volume) > 0 {
		t.Errorf("the queues on the volume hold %d bytes together: want at most half of the volume %s", total, volume.String())
	}
}

func TestQueuesOf(t *testing.T) {
	cfg := map[string]any{"service": map[string]any{"pipelines": map[string]any{
		"traces":        map[string]any{"exporters": []any{"svc"}},
		"traces/scores": map[string]any{"exporters": []any{"svcscore"}},
		"logs":          map[string]any{"exporters": []any{"svc", "debug"}},
		"logs/2":        map[string]any{"exporters": []any{"svc"}},
	}}}
	for exporter, want := range map[string]int{"svc": 2, "debug": 1, "svcscore": 1, "unused": 0} {
		if got := queuesOf(cfg, exporter); got != want {
			t.Errorf("queuesOf(%s) = %d, want %d", exporter, got, want)
		}
	}
}
