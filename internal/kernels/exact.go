package kernels

// SetExactColumns makes every MatMul (and MatMulShared) of at most n
// activation vectors compute each vector with the row dot product of a
// one-vector MatMul, so that each vector's results are bit-identical to a
// MatMul of that vector alone; larger products keep the tiles. The tiles
// agree with the row dot only up to the order of float operations, which
// speculative decoding cannot accept: the target's verification of 1+k
// tokens in one step must give the logits (and keys and values) plain
// decode gives one token at a time, or greedy output could differ at a
// near tie. Each chunk of weight rows stays in cache while the vectors
// pass, so a decode-sized product still reads the weights once. 0 (the
// default) turns it off. Not safe to call while the pool runs a product.
func (p *Pool) SetExactColumns(n int) {
	p.mu.Lock()
	p.exactCols = max(n, 0)
	p.mu.Unlock()
}

// ExactColumns is the bound SetExactColumns set (0: off), for the layers
// whose own arithmetic has a batched form that rounds differently
// (DeltaNet's chunked recurrence): they keep the one-token form for
// batches this small.
func (p *Pool) ExactColumns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exactCols
}
