"""The bottom layer: errors, fault points and other primitives every layer may import.

Nothing in ``ouroactors.core`` imports thespian, LMDB or any higher layer.
"""
