//go:build unix

package svcfilestorageextension

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: another open file (of another process) holds the lock.
var errLocked = errors.New("locked")

// tryLock takes an exclusive flock without waiting. The kernel releases it when the process
// ends, however it ends (a SIGKILL leaves no stale lock).
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
