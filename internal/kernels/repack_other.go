//go:build !linux

package kernels

func adviseHuge([]byte) {}
