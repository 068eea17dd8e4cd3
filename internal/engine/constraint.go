package engine

import "braid/internal/sample"

// Constraint limits what a sequence may generate: a grammar that the
// output must follow (grammar.Constraint). The scheduler has it sample each
// token of its sequence and tells it the token emitted.
type Constraint interface {
	// Sample picks the next token from row (a full row of logits) with s,
	// among the tokens allowed. It may overwrite row; with masked set it
	// leaves every token not allowed at -Inf, so that logprobs computed
	// from row afterwards are those of the constrained distribution.
	Sample(s *sample.Sampler, row []float32, masked bool) int32
	// Advance records the emitted token and reports whether the output is
	// complete with nothing allowed to follow: the sequence then ends
	// with FinishStop without another step.
	Advance(id int32) bool
}

// BudgetedConstraint is a Constraint that keeps room to finish its
// structure within the tokens the sequence may still write: the scheduler
// tells it, before each Sample, how many that is (the token being sampled
// included), the least of what MaxTokens, the sequence's reserved
// positions and the context leave.
type BudgetedConstraint interface {
	Constraint
	Budget(left int)
}
