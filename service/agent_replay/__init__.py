"""Durable event-log replay service for AI agent runs."""
