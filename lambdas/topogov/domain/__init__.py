"""Pure domain logic: no AWS, no Kubernetes, no clock, no environment."""
