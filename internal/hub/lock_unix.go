//go:build unix

package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// fileLock holds an exclusive flock on path, the lock the Hugging Face tools
// take on the same file (.locks/models--ORG--NAME/<sha256>.lock), so a
// blob is written by one process at a time, braid or not. waiting is called
// once if another process holds it.
func fileLock(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		if !told && waiting != nil {
			told = true
			waiting()
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			f.Close()
			return nil, err
		}
	}
}
