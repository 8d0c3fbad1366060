/**
 * RFC 6570 level-1 URI templates (`{var}` simple string expansion), which is what MCP resource templates use in
 * practice. A simple expansion percent-encodes every reserved character, so a variable never spans `/`, `?`
 * or `#`; values are percent-decoded on the way out.
 */
export class UriTemplate {
  readonly variables: readonly string[];
  /** Literal characters; more literal text means a more specific template, tried first. */
  readonly literalLength: number;
  private readonly pattern: RegExp;

  constructor(readonly template: string) {
    const variables: string[] = [];
    let source = '^';
    let literalLength = 0;
    let rest = template;
    while (rest.length > 0) {
      const open = rest.indexOf('{');
      const literal = open === -1 ? rest : rest.slice(0, open);
      if (literal.includes('}')) throw new Error(`unbalanced "}" in URI template ${template}`);
      source += escapeRegExp(literal);
      literalLength += literal.length;
      if (open === -1) break;
      const close = rest.indexOf('}', open);
      if (close === -1) throw new Error(`unclosed "{" in URI template ${template}`);
      const name = rest.slice(open + 1, close);
      if (!/^[A-Za-z0-9_]+$/.test(name)) {
        throw new Error(
          `URI template ${template}: "{${name}}" is not a level-1 variable (letters, digits, _ only)`,
        );
      }
      if (variables.includes(name))
        throw new Error(`URI template ${template} repeats the variable {${name}}`);
      variables.push(name);
      source += '([^/?#]+)';
      rest = rest.slice(close + 1);
    }
    if (variables.length === 0)
      throw new Error(`URI template ${template} has no {variable}; declare it as a uri`);
    this.variables = variables;
    this.literalLength = literalLength;
    this.pattern = new RegExp(`${source}$`);
  }

  /** The variables of `uri` when it matches, else undefined. */
  match(uri: string): Record<string, string> | undefined {
    const m = this.pattern.exec(uri);
    if (!m) return undefined;
    const params: Record<string, string> = {};
    try {
      this.variables.forEach((name, i) => {
        params[name] = decodeURIComponent(m[i + 1]);
      });
    } catch {
      return undefined; // malformed percent-encoding cannot name a resource
    }
    return params;
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
