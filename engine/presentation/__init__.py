"""Helpers for people, not physics: reports, shareable links and one-field-at-a-time editing."""
