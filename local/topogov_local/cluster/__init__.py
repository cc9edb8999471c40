"""The local stack's Kubernetes side: a real control plane (etcd, kube-apiserver, the controller
manager, the scheduler), the real Kueue v0.17.0 and KWOK, built from their Go modules
(:mod:`.build`) and started in order (:mod:`.controlplane`), with their certificates (:mod:`.pki`),
Kueue's and KWOK's manifests (:mod:`.manifests`) and a fault-injecting proxy in front of the API
server (:mod:`.faultproxy`)."""
