"""The agent runtime's authorities: each a pure domain module plus a thin actor."""
