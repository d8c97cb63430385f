//go:build !unix

package svcfilestorageextension

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

// tryLock does nothing where flock is not available: the bbolt lock timeout (GetClient) still
// names the directory.
func tryLock(*os.File) error { return nil }
