package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// LoadMode is how a model's bytes are held in memory.
type LoadMode int

const (
	// LoadMmap maps the files read-only and shared: pages come from the
	// page cache on first touch and the kernel may drop them again under
	// pressure (or under proactive reclaim), to be re-read from disk.
	LoadMmap LoadMode = iota
	// LoadRead reads the files into private anonymous memory and drops
	// their page cache copies: reclaim of file pages cannot touch them,
	// and without swap nothing pages them out.
	LoadRead
	// LoadMlock maps the files as LoadMmap does and locks the mapping in
	// memory; it needs RLIMIT_MEMLOCK above the model's size (or
	// CAP_IPC_LOCK).
	LoadMlock
)

func (m LoadMode) String() string {
	switch m {
	case LoadMmap:
		return "mmap"
	case LoadRead:
		return "read"
	case LoadMlock:
		return "mlock"
	}
	return fmt.Sprintf("LoadMode(%d)", int(m))
}

// ParseLoadMode reads "mmap", "read" or "mlock".
func ParseLoadMode(s string) (LoadMode, error) {
	for _, m := range []LoadMode{LoadMmap, LoadRead, LoadMlock} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("gguf: load mode %q: want mmap, read or mlock", s)
}

// LoadOptions says how OpenWith or SetMode holds the model.
type LoadOptions struct {
	Mode LoadMode
	// Progress, when set, is called as read mode copies the files, with
	// the bytes copied so far and the total: a large model on a slow disk
	// takes minutes.
	Progress func(done, total int64)
}

// OpenWith opens a model as Open does, holding its bytes as opt.Mode says.
func OpenWith(path string, opt LoadOptions) (*Model, error) {
	if opt.Mode != LoadRead {
		m, err := Open(path)
		if err != nil || opt.Mode == LoadMmap {
			return m, err
		}
		if err := m.SetMode(opt); err != nil {
			m.Close()
			return nil, err
		}
		return m, nil
	}
	// Read mode never maps the file: the header is parsed from the copy.
	m := &Model{byName: map[string]*Tensor{}, mode: LoadRead, progress: opt.Progress}
	if err := m.open(path); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Mode returns how the model's bytes are held.
func (m *Model) Mode() LoadMode { return m.mode }

// SetMode changes how a model opened with mmap holds its bytes (opt.Mode): LoadRead
// copies every part into anonymous memory and unmaps the file, LoadMlock
// locks the mappings. It is for callers that decide after reading the
// header (the memory plan needs the hyper-parameters): call it before
// taking any view of tensor data, since LoadRead moves the bytes and
// Tensor.Data then points at the copy. On error the model is left as it
// was, still usable in mmap mode.
func (m *Model) SetMode(opt LoadOptions) error {
	mode := opt.Mode
	if mode == m.mode {
		return nil
	}
	if m.mode != LoadMmap {
		return fmt.Errorf("gguf: %s is held in %s mode: only a mapped model changes mode", m.Files[0].Path, m.mode)
	}
	switch mode {
	case LoadMlock:
		var locked [][]byte
		for _, f := range m.Files {
			if err := lockMapping(f.Path, f.data); err != nil {
				for _, b := range locked {
					unlockMapping(b)
				}
				return err
			}
			locked = append(locked, f.data)
		}
	case LoadRead:
		copies := make([][]byte, len(m.Files))
		var done int64
		total := m.Bytes()
		for i, f := range m.Files {
			b, err := readAnon(f.Path, func(n int64) {
				done += n
				if opt.Progress != nil {
					opt.Progress(done, total)
				}
			})
			if err == nil && (len(b) != len(f.data) || !bytes.Equal(b[:f.DataOffset], f.data[:f.DataOffset])) {
				err = fmt.Errorf("gguf: %s changed on disk since it was opened (%d bytes then, %d now)", f.Path, len(f.data), len(b))
			}
			if err != nil {
				for _, c := range copies[:i] {
					unmapFile(c)
				}
				if b != nil {
					unmapFile(b)
				}
				return err
			}
			copies[i] = b
		}
		var errs []error
		for i, f := range m.Files {
			old := f.data
			f.data = copies[i]
			for j := range m.maps {
				if len(m.maps[j]) > 0 && len(old) > 0 && &m.maps[j][0] == &old[0] {
					m.maps[j] = copies[i]
				}
			}
			if err := unmapFile(old); err != nil {
				errs = append(errs, fmt.Errorf("gguf: %s: unmapping after the copy: %w", f.Path, err))
			}
		}
		// The Tensors keep their identity (callers may hold them); only
		// their views move to the copies.
		k := 0
		for _, f := range m.Files {
			for i := range f.Tensors {
				m.Tensors[k].Data = f.TensorData(i)
				k++
			}
		}
		m.mode = mode
		return errors.Join(errs...)
	default:
		return fmt.Errorf("gguf: load mode %s cannot be set", mode)
	}
	m.mode = mode
	return nil
}

// mlockError explains a failed mlock: the limit that refused it and how
// to raise it, since the usual cause is a default RLIMIT_MEMLOCK of a few
// MiB, not a lack of memory. cur and max are the soft and hard limits in
// bytes (rlimInfinity for none).
func mlockError(path string, size int64, err error, cur, max uint64) error {
	limit := func(v uint64) string {
		if v == rlimInfinity {
			return "unlimited"
		}
		return fmt.Sprintf("%d KiB", v/1024)
	}
	if cur == rlimInfinity || cur >= uint64(size) {
		return fmt.Errorf("gguf: --load-mode mlock: locking %s (%d MiB) in memory failed: %w; RLIMIT_MEMLOCK (%s) allows it, so the memory itself is short: free some, or use --load-mode read or mmap",
			path, size>>20, err, limit(cur))
	}
	return fmt.Errorf("gguf: --load-mode mlock: locking %s (%d MiB) in memory failed: %w; RLIMIT_MEMLOCK is %s (hard limit %s), below the model: "+
		"raise it with `ulimit -l unlimited` in the shell that starts braid (root, or a hard limit that allows it), LimitMEMLOCK=infinity in a systemd unit, "+
		"`--ulimit memlock=-1` for docker, or a memlock line in /etc/security/limits.conf; or use --load-mode read",
		path, size>>20, err, limit(cur), limit(max))
}

// rlimInfinity is RLIM_INFINITY as getrlimit reports it.
const rlimInfinity = ^uint64(0)

// Bytes is the size of the model's files together: what read mode holds
// in memory, whatever part of them a rank binds.
func (m *Model) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += int64(len(f.data))
	}
	return n
}

// fileSize is path's size, 0 when it cannot be read (for progress only).
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// DropPages says the caller has copied b, a view of this model's tensor
// data, and no longer reads it (a repacked weight): in mmap mode its
// pages leave the process's resident set, to be read back from the page
// cache if b is touched again; in read and mlock modes, whose copies and
// locks are whole files, it does nothing.
func (m *Model) DropPages(b []byte) {
	if m.mode == LoadMmap {
		dropMapped(b)
	}
}
