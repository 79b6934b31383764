// Command pause is the node's pod sandbox process (tests/helpers/kube_node.py): it holds
// a pod's namespaces and does nothing else, as the pause image of a real cluster does. It
// sleeps until SIGTERM or SIGINT and exits 0; as PID 1 of the sandbox it also reaps any
// orphan that ends up as its child. Built static (CGO_ENABLED=0, Makefile), it needs
// nothing from the image around it: the image holds this one file.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("pause (replicator test node) 1.0")
		return
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
