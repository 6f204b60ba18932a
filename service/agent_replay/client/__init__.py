"""A producer client for `replay`'s HTTP API: append a run's events exactly once.

    async with Producer("http://127.0.0.1:8000", "run-1") as producer:
        seq = await producer.send({"type": "TEXT_MESSAGE_CONTENT", ...})   # durable
        producer.submit(chunk)                                             # batched
        await producer.close_run()

It follows the retry contract in the README ("Producers that retry"): every
batch carries `expected_seq`, so a retry after a 503, a refused connection
or a lost answer is stored once. A client of the public API only: it imports
nothing of the service.
"""

from agent_replay.client.producer import Ack, Producer, ProducerError, RetryPolicy

__all__ = ["Ack", "Producer", "ProducerError", "RetryPolicy"]
