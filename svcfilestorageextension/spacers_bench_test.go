package svcfilestorageextension

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// BenchmarkQueueWrites writes items of 190 KB (a gzip span batch of the load runs) through a
// file_storage client in the transactions of exporterhelper v0.164's persistent queue (queue:
// the item and the metadata; read: the metadata, get the item; done: delete it, the metadata),
// with `queued` items in the queue at once, on contrib's file_storage, on this one as it is by
// default (its leaf spacers) and on this one with large_value_files (the items in value files).
// written-KB/item is what the process wrote (wchar of /proc/self/io) per item, dirtied-KB/item
// the page cache it made dirty (write_bytes: what reaches the disk unless written over before
// the kernel writes it back) and cpu-us/item its CPU time (user + system) per item: compare the
// sub-benchmarks of the same run.
//
//	go test -run '^$' -bench 'BenchmarkQueueWrites' -count 6 . | tee out.txt; benchstat -col /storage out.txt
func BenchmarkQueueWrites(b *testing.B) {
	item := make([]byte, 190<<10)
	for i := range item {
		item[i] = byte(rand.Uint32())
	}
	meta := make([]byte, 40)
	for _, queued := range []int{1, 3} {
		for _, kind := range []string{"contrib", "spaced", "valuefiles"} {
			b.Run("queued="+strconv.Itoa(queued)+"/storage="+kind, func(b *testing.B) {
				ctx := context.Background()
				client := startClient(b, storageFactories[kind])
				var next, first uint64
				put := func() {
					require.NoError(b, client.Batch(ctx, storage.SetOperation("qmv0", meta),
						storage.SetOperation(strconv.FormatUint(next, 10), item)))
					next++
				}
				for range queued - 1 {
					put()
				}
				written, dirtied, cpu := wchar(b), processIO(b, "write_bytes"), cpuTime()
				for b.Loop() {
					put()
					get := storage.GetOperation(strconv.FormatUint(first, 10))
					require.NoError(b, client.Batch(ctx, storage.SetOperation("qmv0", meta), get))
					require.Len(b, get.Value, len(item))
					require.NoError(b, client.Batch(ctx, storage.DeleteOperation(strconv.FormatUint(first, 10)),
						storage.SetOperation("qmv0", meta)))
					first++
				}
				b.ReportMetric(float64(wchar(b)-written)/1024/float64(b.N), "written-KB/item")
				b.ReportMetric(float64(processIO(b, "write_bytes")-dirtied)/1024/float64(b.N), "dirtied-KB/item")
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/item")
			})
		}
	}
}

// storageFactories are the storages compared: contrib's file_storage, this one as it is by
// default (leaf spacers), and this one with large_value_files.
var storageFactories = map[string]func(dir string) (extension.Factory, component.Config){
	"contrib": func(dir string) (extension.Factory, component.Config) {
		f := filestorage.NewFactory()
		cfg := f.CreateDefaultConfig().(*filestorage.Config)
		cfg.Directory = dir
		return f, cfg
	},
	"spaced": func(dir string) (extension.Factory, component.Config) {
		f := NewFactory()
		cfg := f.CreateDefaultConfig().(*Config)
		cfg.Directory = dir
		return f, cfg
	},
	"valuefiles": func(dir string) (extension.Factory, component.Config) {
		f := NewFactory()
		cfg := f.CreateDefaultConfig().(*Config)
		cfg.Directory = dir
		cfg.LargeValueFiles = true
		return f, cfg
	},
}

func startClient(b testing.TB, factory func(dir string) (extension.Factory, component.Config)) storage.Client {
	f, cfg := factory(b.TempDir())
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(b, err)
	require.NoError(b, ext.Start(context.Background(), componenttest.NewNopHost()))
	client, err := ext.(storage.Extension).GetClient(context.Background(), component.KindExporter, component.MustNewID("svc"), "traces")
	require.NoError(b, err)
	b.Cleanup(func() {
		require.NoError(b, client.Close(context.Background()))
		require.NoError(b, ext.Shutdown(context.Background()))
	})
	return client
}

// cpuTime is the CPU time the process used so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// wchar is the bytes the process has passed to write calls so far.
func wchar(b testing.TB) int64 {
	return processIO(b, "wchar")
}

// processIO is a counter of /proc/self/io: wchar, or write_bytes (the bytes of the page cache
// pages the process made dirty, which the kernel writes to disk unless they are written over
// first; a page already dirty counts once).
func processIO(b testing.TB, field string) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io")
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+": "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(b, err)
			return n
		}
	}
	b.Skip("no " + field + " in /proc/self/io")
	return 0
}
