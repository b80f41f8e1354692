"""Supervision: specs, pure decision tables and state machine, and the actor shells.

Import from ``ouroactors`` directly; this package's modules are the implementation.
"""
