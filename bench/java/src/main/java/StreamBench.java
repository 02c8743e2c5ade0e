// Benchmark peer for `python -m bench`: the RabbitMQ Java stream client in its documented
// high-throughput mode, timed inside the JVM (start-up and connection excluded).
//
//   java -cp target/classes:target/dependency/* StreamBench publish <stream> <n> <size>
//   java -cp target/classes:target/dependency/* StreamBench consume <stream> <n>
//
// publish: n messages of <size> bytes (one AMQP data section each) with a confirm callback,
// the client's defaults for batching and unconfirmed messages; the clock stops when every
// message is confirmed. A warm-up of n/4 messages goes to a throw-away stream first, so the
// JIT has compiled the hot path (what a long stream-perf-test run measures).
// consume: the first n messages of <stream>, each body read; the stream is read once to warm
// up and once timed.
//
// The broker is RMQ_HOST:RMQ_PORT (default 127.0.0.1:5552), RMQ_USER/RMQ_PASSWORD (default
// guest/guest); every connection goes to that address, whatever the broker advertises.
// Output: one JSON line {"rate": messages per second}.

import com.rabbitmq.stream.Address;
import com.rabbitmq.stream.Consumer;
import com.rabbitmq.stream.Environment;
import com.rabbitmq.stream.OffsetSpecification;
import com.rabbitmq.stream.Producer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

public final class StreamBench {

  private static final long TIMEOUT_SECONDS = 120;

  private StreamBench() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: StreamBench publish <stream> <n> <size> | consume <stream> <n>");
      System.exit(2);
    }
    String host = env("RMQ_HOST", "127.0.0.1");
    int port = Integer.parseInt(env("RMQ_PORT", "5552"));
    Address address = new Address(host, port);
    int n = Integer.parseInt(args[2]);
    double rate;
    try (Environment environment =
        Environment.builder()
            .host(host)
            .port(port)
            .username(env("RMQ_USER", "guest"))
            .password(env("RMQ_PASSWORD", "guest"))
            .addressResolver(advertised -> address)
            .build()) {
      switch (args[0]) {
        case "publish" -> {
          byte[] body = new byte[Integer.parseInt(args[3])];
          String warmup = args[1] + "-java-warmup";
          environment.streamCreator().stream(warmup).create();
          try {
            publish(environment, warmup, Math.max(n / 4, 1), body);
          } finally {
            environment.deleteStream(warmup);
          }
          rate = publish(environment, args[1], n, body);
        }
        case "consume" -> {
          consume(environment, args[1], n);
          rate = consume(environment, args[1], n);
        }
        default -> {
          System.err.println("unknown command " + args[0]);
          System.exit(2);
          return;
        }
      }
    }
    System.out.println("{\"rate\": " + rate + "}");
    System.out.flush();
    System.exit(0);
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  private static double publish(Environment environment, String stream, int n, byte[] body)
      throws Exception {
    Producer producer = environment.producerBuilder().stream(stream).build();
    CountDownLatch confirmed = new CountDownLatch(n);
    AtomicReference<String> failure = new AtomicReference<>();
    long started = System.nanoTime();
    for (int i = 0; i < n; i++) {
      producer.send(
          producer.messageBuilder().addData(body).build(),
          status -> {
            if (!status.isConfirmed()) {
              failure.compareAndSet(null, "code " + status.getCode());
            }
            confirmed.countDown();
          });
    }
    if (!confirmed.await(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
      throw new IllegalStateException(confirmed.getCount() + " messages unconfirmed");
    }
    long elapsed = System.nanoTime() - started;
    producer.close();
    if (failure.get() != null) {
      throw new IllegalStateException("publish failed: " + failure.get());
    }
    return n / (elapsed / 1e9);
  }

  private static double consume(Environment environment, String stream, int n) throws Exception {
    CountDownLatch received = new CountDownLatch(n);
    AtomicLong bytes = new AtomicLong();
    long started = System.nanoTime();
    Consumer consumer =
        environment.consumerBuilder().stream(stream)
            .offset(OffsetSpecification.first())
            .messageHandler(
                (context, message) -> {
                  bytes.addAndGet(message.getBodyAsBinary().length);
                  received.countDown();
                })
            .build();
    if (!received.await(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
      throw new IllegalStateException(received.getCount() + " messages not received");
    }
    long elapsed = System.nanoTime() - started;
    consumer.close();
    return n / (elapsed / 1e9);
  }
}
