"""Renderers: Report → rich table (terminal), JSON, markdown. Renderers never compute."""
