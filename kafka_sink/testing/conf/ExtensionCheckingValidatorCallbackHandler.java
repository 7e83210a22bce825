/*
 * A broker-side OAUTHBEARER callback handler for tests: Kafka's own JWT validation, plus SASL
 * extensions that must arrive with given values (as a managed cluster's logicalCluster or
 * identityPoolId), and a record of every extension the broker received.
 *
 * System properties (set by kafka_sink.testing.local_kafka.OAuthListener):
 *   pykafka.oauth.required.extensions  name=value pairs separated by commas: each must be sent
 *                                      with that value, or the authentication fails;
 *   pykafka.oauth.extensions.log       a file: one line per authentication, the extensions
 *                                      received as name=value separated by tabs, sorted.
 */
package pykafka.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerExtensionsValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler;

public class ExtensionCheckingValidatorCallbackHandler extends OAuthBearerValidatorCallbackHandler {
    private final Map<String, String> required = new TreeMap<>();

    public ExtensionCheckingValidatorCallbackHandler() {
        String spec = System.getProperty("pykafka.oauth.required.extensions", "");
        for (String pair : spec.split(",")) {
            int eq = pair.indexOf('=');
            if (eq > 0) {
                required.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
        }
    }

    @Override
    public void handle(Callback[] callbacks) throws IOException, UnsupportedCallbackException {
        List<Callback> others = new ArrayList<>();
        for (Callback callback : callbacks) {
            if (callback instanceof OAuthBearerExtensionsValidatorCallback) {
                check((OAuthBearerExtensionsValidatorCallback) callback);
            } else {
                others.add(callback);
            }
        }
        if (!others.isEmpty()) {
            super.handle(others.toArray(new Callback[0]));
        }
    }

    private void check(OAuthBearerExtensionsValidatorCallback callback) throws IOException {
        Map<String, String> given = new TreeMap<>(callback.inputExtensions().map());
        record(given);
        for (Map.Entry<String, String> entry : required.entrySet()) {
            if (!entry.getValue().equals(given.get(entry.getKey()))) {
                callback.error(entry.getKey(), "missing or not the expected value");
            }
        }
        for (String name : given.keySet()) {
            if (required.get(name) == null || required.get(name).equals(given.get(name))) {
                callback.valid(name);
            }
        }
    }

    private static synchronized void record(Map<String, String> given) throws IOException {
        String path = System.getProperty("pykafka.oauth.extensions.log");
        if (path == null || path.isEmpty()) {
            return;
        }
        StringBuilder line = new StringBuilder();
        for (Map.Entry<String, String> entry : given.entrySet()) {
            if (line.length() > 0) {
                line.append('\t');
            }
            line.append(entry.getKey()).append('=').append(entry.getValue());
        }
        line.append('\n');
        Files.write(
                Paths.get(path),
                line.toString().getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
    }
}
