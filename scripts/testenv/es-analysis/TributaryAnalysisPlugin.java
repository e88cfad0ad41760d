// The analysis components Elasticsearch's security index needs and its integ-test zip lacks.
//
// The .security index (native users, roles, role mappings, API keys) is created with an "email"
// analyzer: tokenizer uax_url_email, filters pattern_capture, lowercase and unique. The first,
// second and last come from the analysis-common module, which the integ-test zip on Maven Central
// does not carry and which is not published on its own, so without them every _security/user or
// _security/role request fails ("Unknown filter type [pattern_capture]"). scripts/testenv/es-secure.sh
// compiles this file against the distribution's jars and installs it as a module of the secured
// node's distribution. Lucene provides the tokenizer and pattern_capture; unique is the same rule
// as analysis-common's (a term seen before in the stream is dropped).
package dev.tributary.testenv.analysis;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.email.UAX29URLEmailTokenizer;
import org.apache.lucene.analysis.pattern.PatternCaptureGroupTokenFilter;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.elasticsearch.index.analysis.TokenFilterFactory;
import org.elasticsearch.index.analysis.TokenizerFactory;
import org.elasticsearch.indices.analysis.AnalysisModule.AnalysisProvider;
import org.elasticsearch.plugins.AnalysisPlugin;
import org.elasticsearch.plugins.Plugin;

public class TributaryAnalysisPlugin extends Plugin implements AnalysisPlugin {
    @Override
    public Map<String, AnalysisProvider<TokenFilterFactory>> getTokenFilters() {
        return Map.of(
            "pattern_capture", AnalysisPlugin.requiresAnalysisSettings((indexSettings, env, name, settings) -> {
                List<String> regexes = settings.getAsList("patterns");
                if (regexes.isEmpty()) {
                    throw new IllegalArgumentException("pattern_capture filter [" + name + "] needs [patterns]");
                }
                Pattern[] patterns = regexes.stream().map(Pattern::compile).toArray(Pattern[]::new);
                boolean preserveOriginal = settings.getAsBoolean("preserve_original", true);
                return new TokenFilterFactory() {
                    @Override
                    public String name() {
                        return name;
                    }

                    @Override
                    public TokenStream create(TokenStream in) {
                        return new PatternCaptureGroupTokenFilter(in, preserveOriginal, patterns);
                    }
                };
            }),
            "unique", (indexSettings, env, name, settings) -> new TokenFilterFactory() {
                @Override
                public String name() {
                    return name;
                }

                @Override
                public TokenStream create(TokenStream in) {
                    return new UniqueFilter(in);
                }
            });
    }

    @Override
    public Map<String, AnalysisProvider<TokenizerFactory>> getTokenizers() {
        return Map.of("uax_url_email", (indexSettings, env, name, settings) -> {
            int maxTokenLength = settings.getAsInt("max_token_length", 255);
            return TokenizerFactory.newFactory(name, () -> {
                UAX29URLEmailTokenizer t = new UAX29URLEmailTokenizer();
                t.setMaxTokenLength(maxTokenLength);
                return (Tokenizer) t;
            });
        });
    }

    // UniqueFilter drops every term already seen in the stream.
    static final class UniqueFilter extends TokenFilter {
        private final CharTermAttribute term = addAttribute(CharTermAttribute.class);
        private final CharArraySet seen = new CharArraySet(8, false);

        UniqueFilter(TokenStream in) {
            super(in);
        }

        @Override
        public boolean incrementToken() throws IOException {
            while (input.incrementToken()) {
                char[] buf = term.buffer();
                int len = term.length();
                if (seen.contains(buf, 0, len)) {
                    continue;
                }
                seen.add(Arrays.copyOf(buf, len));
                return true;
            }
            return false;
        }

        @Override
        public void reset() throws IOException {
            super.reset();
            seen.clear();
        }
    }
}
