//go:build !unix

package svcfilestorageextension

import (
	"io/fs"
	"path/filepath"
)

// volumeOf: no statfs here; the volume's metrics are not published.
func volumeOf(string) (free, size int64, ok bool) { return 0, 0, false }

// directoryBytes returns the size of the files under dir.
func directoryBytes(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += info.Size()
		}
		return nil
	})
	return total
}
