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
