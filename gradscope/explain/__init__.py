"""Diagnostics: explanations of why the engines disagree (custom backward checks, ...)."""
