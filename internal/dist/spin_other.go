//go:build !linux

package dist

import (
	"net"
	"time"
)

// DefaultSpin is MeshConfig.Spin's default; receives spin on Linux only.
const DefaultSpin = 500 * time.Microsecond

func socketFD(net.Conn) int { return -1 }

func (c *tcpConn) spin(time.Duration, *queue) {}
