/**
 * Notifications a tool module can send to clients, injected like any provider:
 * `constructor(private readonly notifier: McpNotifier) {}`. Part of the public tool-author API.
 */
export abstract class McpNotifier {
  /**
   * A resource changed: every live legacy session subscribed to `uri` (resources/subscribe) gets
   * `notifications/resources/updated` on its GET stream, whichever instance holds it. Returns how many
   * sessions were notified.
   */
  abstract resourceUpdated(uri: string): Promise<number>;
}
