package dist

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shmDir is where pairs share their files: tmpfs, and the same directory
// for every process of one host (a container with its own /dev/shm does
// not share it, and its pairs keep TCP).
var shmDir = "/dev/shm"

// createShm makes, maps and stamps a pair's file for the lower rank.
func createShm(cfg MeshConfig) (*shmLink, shmOffer, error) {
	removeStaleShm()
	cookie := make([]byte, shmCookieLen)
	var name [8]byte
	if _, err := rand.Read(cookie); err != nil {
		return nil, shmOffer{}, err
	}
	if _, err := rand.Read(name[:]); err != nil {
		return nil, shmOffer{}, err
	}
	path := filepath.Join(shmDir, fmt.Sprintf("braid-%d-%s", os.Getpid(), hex.EncodeToString(name[:])))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, shmOffer{}, err
	}
	defer f.Close()
	mem, err := mapShm(f, true)
	if err != nil {
		os.Remove(path)
		return nil, shmOffer{}, err
	}
	copy(mem, cookie)
	return newShmLink(mem, true, cfg), shmOffer{Path: path, Cookie: hex.EncodeToString(cookie), Size: shmFileSize}, nil
}

// openShm maps the lower rank's file and checks that it is the one
// offered (its cookie), so that the pair is on one host for sure.
func openShm(cfg MeshConfig, path string, size int64, cookie []byte) (*shmLink, error) {
	if filepath.Dir(path) != shmDir || size != shmFileSize {
		return nil, fmt.Errorf("offer of %s (%d bytes), want a file of %d under %s", path, size, int64(shmFileSize), shmDir)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	os.Remove(path) // mapped once we return: the name is not needed
	mem, err := mapShm(f, false)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(mem[:shmCookieLen], cookie) {
		unix.Munmap(mem)
		return nil, errors.New("the file's cookie differs from the offer")
	}
	return newShmLink(mem, false, cfg), nil
}

func mapShm(f *os.File, create bool) ([]byte, error) {
	if create {
		if err := f.Truncate(shmFileSize); err != nil {
			return nil, err
		}
	} else if st, err := f.Stat(); err != nil || st.Size() != shmFileSize {
		return nil, fmt.Errorf("the file is not %d bytes (%v)", int64(shmFileSize), err)
	}
	return unix.Mmap(int(f.Fd()), 0, shmFileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func removeShm(path string) { os.Remove(path) }

// removeStaleShm removes the files of processes that are gone: a rank
// killed between making its file and its peer's answer leaves one (the
// name carries the maker's process id).
func removeStaleShm() {
	names, _ := filepath.Glob(filepath.Join(shmDir, "braid-*-*"))
	for _, n := range names {
		var pid int
		var rest string
		if _, err := fmt.Sscanf(filepath.Base(n), "braid-%d-%s", &pid, &rest); err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			os.Remove(n)
		}
	}
}

func (l *shmLink) unmap() { unix.Munmap(l.mem) }

// futexWait sleeps while *addr == val, at most d (FUTEX_WAIT without the
// private flag: the word is shared with another process).
func futexWait(addr *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), 0 /* FUTEX_WAIT */, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on addr.
func futexWake(addr *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), 1 /* FUTEX_WAKE */, 1<<30, 0, 0, 0)
}

// osYield lets another thread on this CPU run (a peer rank sharing it).
func osYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
