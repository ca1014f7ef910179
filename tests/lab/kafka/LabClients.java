// Kafka's Java clients, driven by JSON, for the kinspect lab (tests/lab/kafka.py).
// Java is here only to make real Java-client traffic and broker data; the product is Python.
//
//   java LabClients produce   PROPS_JSON SCRIPT_JSON   steps: send, flush, begin, commit, abort, offsets, sleep
//   java LabClients consume   PROPS_JSON SPEC_JSON     subscribe, read N records, commit, report committed()
//   java LabClients committed PROPS_JSON SPEC_JSON     committed() of a group, without joining it
//   java LabClients share     PROPS_JSON SPEC_JSON     a share-group member (KIP-932), explicit acks
//
// Every outcome is one JSON object per line on stdout: the client's own view, kept as an oracle.
// Bytes: a JSON string is UTF-8, null is null, {"b64": "..."} is raw bytes.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class LabClients {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        Properties props = properties(JSON.readTree(new File(args[1])));
        JsonNode spec = JSON.readTree(new File(args[2]));
        switch (args[0]) {
            case "produce": produce(props, spec); break;
            case "consume": consume(props, spec); break;
            case "committed": committed(props, spec); break;
            case "share": share(props, spec); break;
            default: throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Properties properties(JsonNode node) {
        Properties props = new Properties();
        node.fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        return props;
    }

    // -- produce -----------------------------------------------------------------------------

    private static final class Pending {
        final int step; final JsonNode send; final Future<RecordMetadata> future;
        Pending(int step, JsonNode send, Future<RecordMetadata> future) {
            this.step = step; this.send = send; this.future = future;
        }
    }

    private static void produce(Properties props, JsonNode script) throws Exception {
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<Pending> pending = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (props.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG)) {
                producer.initTransactions();
            }
            for (int step = 0; step < script.size(); step++) {
                JsonNode action = script.get(step);
                if (action.has("send")) {
                    JsonNode send = action.get("send");
                    pending.add(new Pending(step, send, producer.send(record(send))));
                } else if (action.has("flush")) {
                    producer.flush();
                    report(pending);
                } else if (action.has("begin")) {
                    producer.beginTransaction();
                } else if (action.has("commit")) {
                    producer.commitTransaction();
                    report(pending);
                    event("transaction").put("step", step).put("outcome", "commit");
                } else if (action.has("abort")) {
                    producer.flush();
                    report(pending);
                    producer.abortTransaction();
                    event("transaction").put("step", step).put("outcome", "abort");
                } else if (action.has("offsets")) {
                    JsonNode offsets = action.get("offsets");
                    producer.sendOffsetsToTransaction(offsetMap(offsets.get("offsets")),
                            new ConsumerGroupMetadata(offsets.get("group").asText()));
                    event("txn_offsets").put("step", step).set("offsets", offsets);
                } else if (action.has("sleep")) {
                    Thread.sleep(action.get("sleep").asLong());
                }
            }
            producer.flush();
            report(pending);
        }
        flushEvents();
    }

    private static ProducerRecord<byte[], byte[]> record(JsonNode send) {
        List<Header> headers = new ArrayList<>();
        for (JsonNode header : send.path("headers")) {
            headers.add(new RecordHeader(header.get(0).asText(), bytes(header.get(1))));
        }
        Integer partition = send.has("partition") ? send.get("partition").asInt() : null;
        Long timestamp = send.has("timestamp") ? send.get("timestamp").asLong() : null;
        return new ProducerRecord<>(send.get("topic").asText(), partition, timestamp,
                bytes(send.get("key")), bytes(send.get("value")), headers);
    }

    private static void report(List<Pending> pending) throws Exception {
        for (Pending p : pending) {
            RecordMetadata meta = p.future.get();
            ObjectNode out = event("sent").put("step", p.step).put("topic", meta.topic())
                    .put("partition", meta.partition()).put("offset", meta.offset())
                    .put("timestamp", meta.timestamp());
            out.set("key", p.send.get("key"));
            out.set("value", p.send.get("value"));
            if (p.send.has("headers")) out.set("headers", p.send.get("headers"));
        }
        pending.clear();
    }

    // -- consume -----------------------------------------------------------------------------

    // spec: topics | pattern; expect (records, stop when reached); idle_ms (stop that long after the
    // last record, once assigned); timeout_ms; commit_every; commit_metadata; no_final_commit;
    // record_delay_ms (slows a member down so that a second one joins while there is work).
    private static void consume(Properties props, JsonNode spec) throws Exception {
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        int expect = spec.get("expect").asInt();
        long idleMs = spec.path("idle_ms").asLong(0);
        long recordDelayMs = spec.path("record_delay_ms").asLong(0);
        int commitEvery = spec.path("commit_every").asInt(0);
        String metadata = spec.path("commit_metadata").asText("");
        long deadline = System.currentTimeMillis() + spec.path("timeout_ms").asLong(90000);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            Map<TopicPartition, OffsetAndMetadata> position = new LinkedHashMap<>();
            subscribe(consumer, spec, new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    Map<TopicPartition, OffsetAndMetadata> leaving = new LinkedHashMap<>();
                    for (TopicPartition tp : revoked) {
                        OffsetAndMetadata om = position.remove(tp);
                        if (om != null) leaving.put(tp, om);
                    }
                    commit(consumer, leaving, "revoked");
                }
                public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                    ArrayNode partitions = event("assigned").putArray("partitions");
                    for (TopicPartition tp : assigned) partitions.addArray().add(tp.topic()).add(tp.partition());
                }
            });
            int seen = 0;
            long lastProgress = -1;
            while (seen < expect && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                long now = System.currentTimeMillis();
                if (!records.isEmpty() || (lastProgress < 0 && !consumer.assignment().isEmpty())) lastProgress = now;
                if (idleMs > 0 && lastProgress >= 0 && now - lastProgress > idleMs) break;
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    ObjectNode out = event("record").put("topic", r.topic()).put("partition", r.partition())
                            .put("offset", r.offset()).put("timestamp", r.timestamp())
                            .put("timestamp_type", r.timestampType().toString());
                    out.set("key", text(r.key()));
                    out.set("value", text(r.value()));
                    ArrayNode headers = out.putArray("headers");
                    for (Header h : r.headers()) headers.addArray().add(h.key()).add(text(h.value()));
                    position.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, r.leaderEpoch(), metadata));
                    seen++;
                    if (recordDelayMs > 0) Thread.sleep(recordDelayMs);
                    if (commitEvery > 0 && seen % commitEvery == 0) commit(consumer, position, "periodic");
                }
            }
            if (!spec.path("no_final_commit").asBoolean(false)) commit(consumer, position, "final");
            ConsumerGroupMetadata group = consumer.groupMetadata();
            event("member").put("group", group.groupId()).put("member_id", group.memberId())
                    .put("generation", group.generationId())
                    .put("records", seen);
            reportCommitted(consumer, consumer.assignment());
        }
        flushEvents();
    }

    private static void subscribe(KafkaConsumer<byte[], byte[]> consumer, JsonNode spec,
                                  ConsumerRebalanceListener listener) {
        if (spec.has("pattern")) {
            consumer.subscribe(new SubscriptionPattern(spec.get("pattern").asText()), listener);
        } else {
            List<String> topics = new ArrayList<>();
            spec.get("topics").forEach(t -> topics.add(t.asText()));
            consumer.subscribe(topics, listener);
        }
    }

    private static void commit(KafkaConsumer<byte[], byte[]> consumer,
                               Map<TopicPartition, OffsetAndMetadata> position, String why) {
        if (position.isEmpty()) return;
        ObjectNode out = event("commit").put("why", why);
        ArrayNode offsets = out.putArray("offsets");
        position.forEach((tp, om) -> offsets.addObject().put("topic", tp.topic())
                .put("partition", tp.partition()).put("offset", om.offset())
                .put("metadata", om.metadata()));
        try {
            consumer.commitSync(new LinkedHashMap<>(position));
            out.put("ok", true);
        } catch (KafkaException e) {
            out.put("ok", false).put("error", e.toString());
        }
    }

    // spec: topics; expect; timeout_ms; release_first (release the first record once, so it comes
    // back with delivery count 2); reject_every (reject every n-th record, accept the others).
    private static void share(Properties props, JsonNode spec) throws Exception {
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put("share.acknowledgement.mode", "explicit");
        int expect = spec.get("expect").asInt();
        boolean release = spec.path("release_first").asBoolean(false);
        int rejectEvery = spec.path("reject_every").asInt(0);
        long deadline = System.currentTimeMillis() + spec.path("timeout_ms").asLong(90000);
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            List<String> topics = new ArrayList<>();
            spec.get("topics").forEach(t -> topics.add(t.asText()));
            consumer.subscribe(topics);
            int accepted = 0, seen = 0;
            while (accepted < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    seen++;
                    AcknowledgeType ack = AcknowledgeType.ACCEPT;
                    if (release) {
                        ack = AcknowledgeType.RELEASE;
                        release = false;
                    } else if (rejectEvery > 0 && seen % rejectEvery == 0) {
                        ack = AcknowledgeType.REJECT;
                    }
                    consumer.acknowledge(r, ack);
                    if (ack == AcknowledgeType.ACCEPT) accepted++;
                    ObjectNode out = event("record").put("topic", r.topic()).put("partition", r.partition())
                            .put("offset", r.offset()).put("acknowledge", ack.toString());
                    r.deliveryCount().ifPresent(count -> out.put("delivery_count", count));
                    out.set("key", text(r.key()));
                    out.set("value", text(r.value()));
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
                if (!results.isEmpty()) {
                    ObjectNode commit = event("share_commit");
                    results.forEach((tip, error) -> commit.put(tip.toString(),
                            error.map(Throwable::toString).orElse("ok")));
                }
            }
            event("member").put("records", seen).put("accepted", accepted);
        }
        flushEvents();
    }

    private static void committed(Properties props, JsonNode spec) throws Exception {
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Set<TopicPartition> partitions = new HashSet<>();
        for (JsonNode tp : spec.get("partitions")) {
            partitions.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            reportCommitted(consumer, partitions);
        }
        flushEvents();
    }

    private static void reportCommitted(KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> partitions) {
        ArrayNode offsets = event("committed").put("group", consumer.groupMetadata().groupId())
                .putArray("offsets");
        consumer.committed(partitions, Duration.ofSeconds(30)).forEach((tp, om) -> {
            ObjectNode o = offsets.addObject().put("topic", tp.topic()).put("partition", tp.partition());
            if (om == null) {
                o.putNull("offset");
            } else {
                o.put("offset", om.offset()).put("metadata", om.metadata());
                if (om.leaderEpoch().isPresent()) o.put("leader_epoch", om.leaderEpoch().get());
            }
        });
    }

    private static Map<TopicPartition, OffsetAndMetadata> offsetMap(JsonNode offsets) {
        Map<TopicPartition, OffsetAndMetadata> map = new LinkedHashMap<>();
        for (JsonNode o : offsets) {
            map.put(new TopicPartition(o.get("topic").asText(), o.get("partition").asInt()),
                    new OffsetAndMetadata(o.get("offset").asLong(), o.path("metadata").asText("")));
        }
        return map;
    }

    // -- bytes and output ----------------------------------------------------------------------

    private static byte[] bytes(JsonNode node) {
        if (node == null || node.isNull()) return null;
        if (node.isObject()) return Base64.getDecoder().decode(node.get("b64").asText());
        return node.asText().getBytes(StandardCharsets.UTF_8);
    }

    private static JsonNode text(byte[] data) {
        if (data == null) return JSON.nullNode();
        try {
            return JSON.getNodeFactory().textNode(StandardCharsets.UTF_8.newDecoder()
                    .decode(java.nio.ByteBuffer.wrap(data)).toString());
        } catch (java.nio.charset.CharacterCodingException e) {
            return JSON.createObjectNode().put("b64", Base64.getEncoder().encodeToString(data));
        }
    }

    private static final List<ObjectNode> EVENTS = new ArrayList<>();

    private static ObjectNode event(String type) {
        ObjectNode node = JSON.createObjectNode().put("event", type);
        EVENTS.add(node);
        return node;
    }

    // Events are filled in after creation, so they are printed at the end, in order.
    private static void flushEvents() throws Exception {
        for (ObjectNode node : EVENTS) System.out.println(JSON.writeValueAsString(node));
        EVENTS.clear();
    }
}
