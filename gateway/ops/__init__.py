"""Operator verbs outside the request path: doctor, gc and the maintenance commands."""
