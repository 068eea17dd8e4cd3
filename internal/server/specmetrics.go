package server

import (
	"fmt"
	"io"

	"braid/internal/engine"
)

// writeSpec exports speculative decoding's counts (nothing without it):
// drafts proposed and accepted per draft position, verification steps,
// and the mean number of drafts a step keeps.
func writeSpec(w io.Writer, st *engine.SpecStats) {
	if st == nil {
		return
	}
	fmt.Fprintln(w, "# HELP braid_spec_drafted_total Draft tokens proposed, by draft position (1 = first draft of a step).\n# TYPE braid_spec_drafted_total counter")
	for i, n := range st.Drafted {
		fmt.Fprintf(w, "braid_spec_drafted_total{position=\"%d\"} %d\n", i+1, n)
	}
	fmt.Fprintln(w, "# HELP braid_spec_accepted_total Draft tokens the model accepted, by draft position.\n# TYPE braid_spec_accepted_total counter")
	for i, n := range st.Accepted {
		fmt.Fprintf(w, "braid_spec_accepted_total{position=\"%d\"} %d\n", i+1, n)
	}
	fmt.Fprintln(w, "# HELP braid_spec_acceptance_ratio Accepted over drafted, by draft position, since the start.\n# TYPE braid_spec_acceptance_ratio gauge")
	for i, r := range st.Acceptance() {
		fmt.Fprintf(w, "braid_spec_acceptance_ratio{position=\"%d\"} %g\n", i+1, r)
	}
	fmt.Fprintf(w, "# HELP braid_spec_verify_steps_total Sequence steps that verified drafts.\n# TYPE braid_spec_verify_steps_total counter\nbraid_spec_verify_steps_total %d\n", st.Steps)
	fmt.Fprintf(w, "# HELP braid_spec_accepted_per_step Mean drafts accepted per verification.\n# TYPE braid_spec_accepted_per_step gauge\nbraid_spec_accepted_per_step %g\n", st.MeanAccepted())
}
