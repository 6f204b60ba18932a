"""Helpers the tests share: PostgreSQL, servers, clusters, proxies, Node."""
