//go:build !linux

package dist

import (
	"net"
	"time"
)

// Receives spin on Linux only.

func socketFD(net.Conn) int { return -1 }

func (c *tcpConn) spin(time.Duration, *queue) bool { return true }
