//go:build !linux

package dist

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

// Shared memory between ranks is built on Linux only; pairs elsewhere keep
// TCP for everything.

var errNoShm = errors.New("shared memory between ranks is supported on Linux only")

func createShm(MeshConfig) (*shmLink, shmOffer, error) { return nil, shmOffer{}, errNoShm }

func openShm(MeshConfig, string, int64, []byte) (*shmLink, error) { return nil, errNoShm }

func removeShm(string) {}

func (l *shmLink) unmap() {}

func futexWait(*atomic.Uint32, uint32, time.Duration) { time.Sleep(time.Millisecond) }

func futexWake(*atomic.Uint32) {}

func osYield() { runtime.Gosched() }
