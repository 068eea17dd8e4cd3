package kernels

// SetExactColumns makes every MatMul (and MatMulShared) of at most n
// activation vectors give each vector the bits a MatMul of that vector
// alone gives. Speculative decoding needs it: the target's verification
// of 1+k tokens in one step must give the logits (and keys and values)
// plain decode gives one token at a time, or greedy output could differ
// at a near tie.
//
// Most kernels give those bits at about the tiles' cost. Some tiles
// compute each column as the one-vector product does (dotImpl.exactTiles:
// on AVX-512 the Q8_0-style 4x4 tiles, which follow the row dot, and
// Q6_K's, which are its dot-order kernel); Q4_K and Q5_K with AVX-512
// VNNI, and Q4_K, Q5_K and Q6_K with AVX2, have a
// second multi-column kernel in their row dot's arithmetic
// (dotImpl.mmDot), which the bound selects; kernels without
// tiles (F32, which has none so that a batch of steps keeps each
// sequence's bits) use the row dot for every vector anyway. For the rest (F16, BF16,
// MXFP4 with VBMI, the NEON K-quant tiles) the bound makes the
// product run the row dot once per vector, each chunk of weight rows
// staying in cache while the vectors pass, so the weights are still read
// once. Larger products keep the tiles. 0 (the default) turns it off. Not
// safe to call while the pool runs a product.
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
