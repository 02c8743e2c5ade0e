// Interop helper for streamwire's tests: the RabbitMQ Java stream client publishing and
// consuming AMQP 1.0 messages through the broker streamwire talks to.
//
//   java -cp target/classes:target/dependency/* Interop publish <stream> <n>
//   java -cp target/classes:target/dependency/* Interop consume <stream> <n>
//
// The broker is RMQ_HOST:RMQ_PORT (default 127.0.0.1:5552) with RMQ_USER/RMQ_PASSWORD
// (default guest/guest). Every connection goes to that address, whatever the broker
// advertises. Output: one JSON object per line on stdout; diagnostics on stderr.
//
// publish: n messages, body "java-<i>" (UTF-8), every field of the properties section (the
// message and correlation ids cycle through ulong, uuid, binary and string),
// message annotations (x-opt-a string, x-opt-n long, x-opt-u uuid, x-opt-sym symbol,
// x-opt-ts timestamp) and application properties of every simple AMQP type, including
// non-ASCII strings. Prints {"published": n} once every message is confirmed.
//
// consume: the first n messages of the stream, one line each:
// {"offset": 0, "body_hex": "...", "props": {"name": {"type": "...", "value": ...}},
//  "annotations": {...same shape...}, "properties": null or {"message_id": {"type": ...,
//  "value": ...}, ... every field of com.rabbitmq.stream.Properties as its getter returns it}}
// Types are Java simple class names ("null" when unset); the times and the group sequence
// are the getters' primitive longs (ms since the epoch; 0 and -1 when unset), as JSON numbers.

import com.rabbitmq.stream.Address;
import com.rabbitmq.stream.Consumer;
import com.rabbitmq.stream.Environment;
import com.rabbitmq.stream.Message;
import com.rabbitmq.stream.MessageBuilder;
import com.rabbitmq.stream.OffsetSpecification;
import com.rabbitmq.stream.Producer;
import com.rabbitmq.stream.Properties;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

public final class Interop {

  /** stdout in UTF-8 whatever the platform locale (the JSON carries non-ASCII text). */
  private static final PrintStream OUT =
      new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

  private Interop() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: Interop publish|consume <stream> <n>");
      System.exit(2);
    }
    String command = args[0];
    String stream = args[1];
    int n = Integer.parseInt(args[2]);
    String host = env("RMQ_HOST", "127.0.0.1");
    int port = Integer.parseInt(env("RMQ_PORT", "5552"));
    Address address = new Address(host, port);
    try (Environment environment =
        Environment.builder()
            .host(host)
            .port(port)
            .username(env("RMQ_USER", "guest"))
            .password(env("RMQ_PASSWORD", "guest"))
            .addressResolver(advertised -> address)
            .build()) {
      switch (command) {
        case "publish" -> publish(environment, stream, n);
        case "consume" -> consume(environment, stream, n);
        default -> {
          System.err.println("unknown command " + command);
          System.exit(2);
        }
      }
    }
    OUT.flush();
    System.exit(0);
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  private static void publish(Environment environment, String stream, int n) throws Exception {
    Producer producer = environment.producerBuilder().stream(stream).build();
    CountDownLatch confirmed = new CountDownLatch(n);
    AtomicReference<String> failure = new AtomicReference<>();
    for (int i = 0; i < n; i++) {
      MessageBuilder builder = producer.messageBuilder();
      MessageBuilder.PropertiesBuilder ids = builder.properties();
      switch (i % 4) {
        case 0 -> ids.messageId(i == 0 ? -1L : 1_000_000L + i); // ulong (-1L: 2^64 - 1)
        case 1 -> ids.messageId(new UUID(0x0123456789abcdefL, i));
        case 2 -> ids.messageId(new byte[] {(byte) 0xff, 0, (byte) i});
        default -> ids.messageId("java-id-" + i + "-é");
      }
      switch ((i + 1) % 4) {
        case 0 -> ids.correlationId(i);
        case 1 -> ids.correlationId(new UUID(0, i));
        case 2 -> ids.correlationId(new byte[] {(byte) i});
        default -> ids.correlationId("corr-" + i);
      }
      Message message =
          ids.messageBuilder()
              .properties()
              .userId(new byte[] {'u', 0, (byte) 0xff, (byte) i})
              .to(i == 10 ? "" : "/queues/dest-é-" + i)
              .subject(i == 9 ? "é".repeat(200) : "sujet-é")
              .replyTo("/queues/réponse")
              .contentType("application/json")
              .contentEncoding("gzip")
              .absoluteExpiryTime(1_700_000_000_123L + i)
              .creationTime(i == 5 ? -31_536_000_001L : 1_600_000_000_456L + i)
              .groupId("groupe-日本")
              .groupSequence(i == 7 ? 4_294_967_295L : i)
              .replyToGroupId("réponse-groupe-" + i)
              .messageBuilder()
              .messageAnnotations()
              .entry("x-opt-a", "α-" + i)
              .entry("x-opt-n", i * 1_000_000_000L)
              .entry("x-opt-u", new UUID(0x0123456789abcdefL, i))
              .entrySymbol("x-opt-sym", "sym-" + i)
              .entryTimestamp("x-opt-ts", 1_700_000_000_123L + i)
              .messageBuilder()
              .applicationProperties()
              .entry("s", "café-ß")
              .entry("clé-日本", "ü")
              .entry("empty", "")
              .entry("empty-bin", new byte[0])
              .entry("jp", "日本")
              .entry("i", i)
              .entry("neg", -7)
              .entry("l", 5_000_000_000L)
              .entry("b", true)
              .entry("byte", (byte) -5)
              .entry("short", (short) -300)
              .entryUnsigned("ubyte", (byte) 200)
              .entryUnsigned("ushort", (short) 65535)
              .entryUnsigned("uint", (int) 4_000_000_000L)
              .entryUnsigned("ulong", -1L)
              .entry("f", 1.5f)
              .entry("d", 2.25d)
              .entry("bin", new byte[] {0, (byte) 0xff, 7})
              .entrySymbol("sym", "a-symbol")
              .entryTimestamp("ts", 1_700_000_000_123L)
              .entry("uuid", UUID.fromString("12345678-1234-5678-1234-567812345678"))
              .entry("ch", 'λ')
              .messageBuilder()
              .addData(("java-" + i).getBytes(StandardCharsets.UTF_8))
              .build();
      producer.send(
          message,
          status -> {
            if (!status.isConfirmed()) {
              failure.compareAndSet(null, "code " + status.getCode());
            }
            confirmed.countDown();
          });
    }
    if (!confirmed.await(30, TimeUnit.SECONDS)) {
      throw new IllegalStateException("confirmations missing: " + confirmed.getCount());
    }
    if (failure.get() != null) {
      throw new IllegalStateException("publish failed: " + failure.get());
    }
    producer.close();
    OUT.println("{\"published\": " + n + "}");
  }

  private static void consume(Environment environment, String stream, int n) throws Exception {
    CountDownLatch received = new CountDownLatch(n);
    List<String> lines = new ArrayList<>();
    Consumer consumer =
        environment.consumerBuilder().stream(stream)
            .offset(OffsetSpecification.first())
            .messageHandler(
                (context, message) -> {
                  synchronized (lines) {
                    if (lines.size() < n) {
                      lines.add(describe(context.offset(), message));
                      received.countDown();
                    }
                  }
                })
            .build();
    boolean complete = received.await(30, TimeUnit.SECONDS);
    consumer.close();
    synchronized (lines) {
      for (String line : lines) {
        OUT.println(line);
      }
    }
    if (!complete) {
      throw new IllegalStateException("only " + lines.size() + " of " + n + " messages arrived");
    }
  }

  private static String describe(long offset, Message message) {
    StringBuilder out = new StringBuilder();
    out.append("{\"offset\": ").append(offset);
    out.append(", \"body_hex\": ").append(quote(hex(message.getBodyAsBinary())));
    out.append(", \"props\": ").append(describeMap(message.getApplicationProperties()));
    out.append(", \"annotations\": ").append(describeMap(message.getMessageAnnotations()));
    out.append(", \"properties\": ").append(describeProperties(message.getProperties()));
    out.append("}");
    return out.toString();
  }

  /** Every field of the properties section, as the client's getters return it. */
  private static String describeProperties(Properties properties) {
    if (properties == null) {
      return "null";
    }
    Map<String, Object> objects = new LinkedHashMap<>();
    objects.put("message_id", properties.getMessageId());
    objects.put("user_id", properties.getUserId());
    objects.put("to", properties.getTo());
    objects.put("subject", properties.getSubject());
    objects.put("reply_to", properties.getReplyTo());
    objects.put("correlation_id", properties.getCorrelationId());
    objects.put("content_type", properties.getContentType());
    objects.put("content_encoding", properties.getContentEncoding());
    objects.put("group_id", properties.getGroupId());
    objects.put("reply_to_group_id", properties.getReplyToGroupId());
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<String, Object> entry : objects.entrySet()) {
      Object value = entry.getValue();
      out.append(quote(entry.getKey())).append(": {\"type\": ");
      out.append(quote(value == null ? "null" : value.getClass().getSimpleName()));
      out.append(", \"value\": ").append(jsonValue(value)).append("}, ");
    }
    out.append("\"absolute_expiry_time\": {\"type\": \"long\", \"value\": ")
        .append(properties.getAbsoluteExpiryTime())
        .append("}, ");
    out.append("\"creation_time\": {\"type\": \"long\", \"value\": ")
        .append(properties.getCreationTime())
        .append("}, ");
    out.append("\"group_sequence\": {\"type\": \"long\", \"value\": ")
        .append(properties.getGroupSequence())
        .append("}");
    return out.append("}").toString();
  }

  private static String describeMap(Map<String, Object> map) {
    StringBuilder out = new StringBuilder("{");
    if (map != null) {
      boolean first = true;
      for (Map.Entry<String, Object> entry : new TreeMap<>(map).entrySet()) {
        if (!first) {
          out.append(", ");
        }
        first = false;
        Object value = entry.getValue();
        out.append(quote(entry.getKey())).append(": {\"type\": ");
        out.append(quote(value == null ? "null" : value.getClass().getSimpleName()));
        out.append(", \"value\": ").append(jsonValue(value)).append("}");
      }
    }
    return out.append("}").toString();
  }

  private static String jsonValue(Object value) {
    if (value == null) {
      return "null";
    }
    if (value instanceof Boolean) {
      return value.toString();
    }
    if (value instanceof byte[] bytes) {
      return quote(hex(bytes));
    }
    byte[] binary = binaryOf(value);
    if (binary != null) {
      return quote(hex(binary));
    }
    // numbers (incl. the unsigned wrappers), strings, symbols, chars, uuids: as text
    return quote(value.toString());
  }

  /** Bytes of a codec-specific binary wrapper (e.g. Qpid Proton's Binary), else null. */
  private static byte[] binaryOf(Object value) {
    if (!value.getClass().getSimpleName().equals("Binary")) {
      return null;
    }
    try {
      Method array = value.getClass().getMethod("getArray");
      Method offset = value.getClass().getMethod("getArrayOffset");
      Method length = value.getClass().getMethod("getLength");
      byte[] data = (byte[]) array.invoke(value);
      int start = (Integer) offset.invoke(value);
      int size = (Integer) length.invoke(value);
      byte[] out = new byte[size];
      System.arraycopy(data, start, out, 0, size);
      return out;
    } catch (ReflectiveOperationException e) {
      return null;
    }
  }

  private static String hex(byte[] bytes) {
    if (bytes == null) {
      return "";
    }
    StringBuilder out = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      out.append(String.format("%02x", b & 0xff));
    }
    return out.toString();
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }
}
