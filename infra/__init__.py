"""The CDK app's constructs: one per capability, composed by a thin stack (stack.py)."""
