//! Kubernetes manifests for workers (`scalebench deploy k8s`).
