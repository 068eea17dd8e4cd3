package cluster

import (
	"net"
	"testing"

	"braid/internal/gguf"
	"braid/internal/model"
)

// TestWorkerReloadKeepsKVCache loads the same shard twice into one worker,
// as a re-form does: the second load empties the KV cache it has instead of
// allocating a new one beside it (which would need twice the KV memory
// while the old one is live, at the moment a node failed); a load of
// another cache size does allocate a new cache.
func TestWorkerReloadKeepsKVCache(t *testing.T) {
	path := streamModel(t)
	w, err := NewWorker(WorkerConfig{Threads: 1, Logger: quietLogger(t), HashCacheDir: t.TempDir()}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.data.Close()
	defer w.unload()
	sha, size, err := newHashCache(t.TempDir()).SHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := model.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := model.Split(c, model.ColumnBlocks(f, c), 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := loadMsg{SHA256: sha, Path: path, Size: size, Rank: 1, World: 2, TP: 2, PP: 1, Shard: shards[1],
		MaxBatch: 16, Ctx: 64, Positions: 128, KVF32: true}
	m.Shard.Notes = nil
	load := func() {
		t.Helper()
		if err := w.load(&m, func(string) {}); err != nil {
			t.Fatal(err)
		}
	}
	load()
	cache := w.cur.r.cache
	if err := cache.Reserve(3, 40); err != nil {
		t.Fatal(err)
	}
	load()
	if w.cur.r.cache != cache {
		t.Fatal("reloading the same shard allocated a second KV cache")
	}
	if st := cache.Stats(); cache.Has(3) || st.BlocksUsed != 0 {
		t.Errorf("reloading the same shard left the cache holding %d blocks (sequence 3 kept: %v)", st.BlocksUsed, cache.Has(3))
	}
	m.Positions = 256
	load()
	if got := w.cur.r.cache; got == cache || got.Config().Blocks != 8 {
		t.Errorf("a load for 256 positions kept a cache of %d blocks", got.Config().Blocks)
	}
}
