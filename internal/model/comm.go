package model

// Comm is what the forward pass needs from the other ranks of a tensor-
// parallel group. The model never sees a transport: the cluster implements
// Comm over TCP or in-process channels.
type Comm interface {
	// Rank is this rank's index in the group, Size the group's size.
	Rank() int
	Size() int
	// AllReduceSum replaces x on every rank by the element-wise sum of x over
	// all ranks, identical bit for bit on every rank.
	AllReduceSum(x []float32) error
}

// Single is the Comm of a group of one: every collective is the identity.
type Single struct{}

// Rank is always 0.
func (Single) Rank() int { return 0 }

// Size is always 1.
func (Single) Size() int { return 1 }

// AllReduceSum leaves x as it is: the sum over one rank.
func (Single) AllReduceSum([]float32) error { return nil }

// StageLink carries the hidden state between pipeline stages: rank i of one
// stage's tensor-parallel group talks to rank i of the next stage's group.
// Every rank of a group holds the same (bit-identical) hidden state after a
// stage, so each pair moves one copy and no rank waits on another's pair.
//
// x is [tokens x embd] float32 values in batch order; its length is known to
// both sides from the batch (every rank runs the same batch), and a transfer
// whose length differs is an error on both sides.
type StageLink interface {
	// Recv fills x with the previous stage's output for this step.
	Recv(x []float32) error
	// Send passes x to the next stage. x may be reused when Send returns.
	Send(x []float32) error
}
