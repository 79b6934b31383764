//go:build tools

// Package tools pins the Kubernetes control plane and Helm that the tests of
// deploy/helm/ run (tests/helpers/kube.py): etcd and kube-apiserver, as
// controller-runtime's envtest runs them, and the helm CLI; and the rest of a
// single node that runs Pods (tests/helpers/kube_node.py): kube-controller-manager,
// kube-scheduler and the kubelet (the sandbox's pause binary is ./pause). The
// Makefile builds them into .cache/k8s/bin/ with `go build`; nothing here is part
// of the product.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
