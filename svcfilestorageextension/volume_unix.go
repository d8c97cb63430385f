//go:build unix

package svcfilestorageextension

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// volumeOf returns the bytes an unprivileged process may still write on the volume of dir, and
// the volume's size (statfs).
func volumeOf(dir string) (free, size int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), true
}

// directoryBytes returns what the files under dir take on the volume: their allocated blocks,
// which is what fills a disk (a bbolt file may be sparse).
func directoryBytes(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			} else {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
