package dist

// NodeFacts is what a node tells its peers about itself in the handshake:
// what it can hold (memory) and run (cores, kernels).
type NodeFacts struct {
	MemTotal     uint64   `json:"mem_total"`
	MemAvailable uint64   `json:"mem_available"`
	MemUsable    uint64   `json:"mem_usable"` // MemAvailable lowered to the cgroup's headroom
	CgroupLimit  uint64   `json:"cgroup_limit,omitempty"`
	Cores        int      `json:"cores"`
	OS           string   `json:"os"`
	Arch         string   `json:"arch"`
	ByteOrder    string   `json:"byte_order"`
	Features     []string `json:"features,omitempty"` // CPU features the kernels use
	Kernels      []string `json:"kernels,omitempty"`  // "TYPE=impl" per weight type
}
