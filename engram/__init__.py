"""Shared plumbing for Engram's services: settings, logging, Kafka and Postgres
factories, auth, crypto, and the operator CLI. Domain logic lives in services."""
