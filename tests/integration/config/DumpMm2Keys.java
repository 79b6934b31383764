// Prints every key of MirrorMaker 2's ConfigDefs (connectors and MirrorMakerConfig),
// one per line: class, key, type, default ("<required>" when none). Run against the
// Kafka jars by tests/integration/config/test_mm2_keys.py; its output is
// tests/unit/config/mm2_keys.tsv, which the unit tests load key by key.
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.kafka.common.config.ConfigDef;

public class DumpMm2Keys {
    public static void main(String[] args) throws Exception {
        String mirror = "org.apache.kafka.connect.mirror.";
        print(field(mirror + "MirrorSourceConfig", "CONNECTOR_CONFIG_DEF"), "MirrorSourceConfig");
        print(field(mirror + "MirrorCheckpointConfig", "CONNECTOR_CONFIG_DEF"), "MirrorCheckpointConfig");
        print(field(mirror + "MirrorHeartbeatConfig", "CONNECTOR_CONFIG_DEF"), "MirrorHeartbeatConfig");
        Method config = Class.forName(mirror + "MirrorMakerConfig").getDeclaredMethod("config");
        config.setAccessible(true);
        print((ConfigDef) config.invoke(null), "MirrorMakerConfig");
    }

    static ConfigDef field(String className, String name) throws Exception {
        Field f = Class.forName(className).getDeclaredField(name);
        f.setAccessible(true);
        return (ConfigDef) f.get(null);
    }

    static void print(ConfigDef def, String owner) {
        for (ConfigDef.ConfigKey k : def.configKeys().values()) {
            String value;
            if (!k.hasDefault()) {
                value = "<required>";
            } else if (k.defaultValue instanceof List) {
                value = ((List<?>) k.defaultValue).stream().map(Object::toString)
                        .collect(Collectors.joining(","));
            } else {
                value = String.valueOf(ConfigDef.convertToString(k.defaultValue, k.type));
            }
            System.out.println(owner + "\t" + k.name + "\t" + k.type + "\t" + value);
        }
    }
}
