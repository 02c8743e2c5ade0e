"""An application's own integration test using the streamwire pytest plugin: a throwaway
stream on a real broker, removed afterwards. Run with ``pytest examples/app_tests``
(``pip install 'streamwire[testing]'``); README.md, "Test your application", shows it."""

from streamwire.testing import StreamFactory


async def test_orders_round_trip(streamwire_stream: StreamFactory) -> None:
    client, stream = await streamwire_stream("rabbitmq")
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"order 1", key=b"alice", headers={"qty": 2})
    async with client.consumer(stream) as consumer:
        (message,) = await consumer.next_batch(1, timeout=10)
    assert (message.value, message.key) == (b"order 1", b"alice")
    assert message.headers["qty"].value == 2
