import { Injectable } from '@nestjs/common';
import { McpTool, type ToolContext } from '../../../tool-dispatch/index.js';
import { CustomerDirectoryClient, CustomerDirectoryError } from './customer-directory.client.js';
import { CustomerLookupInput } from './customer-lookup.input.js';
import { CustomerOutput } from './customer.output.js';

/**
 * Example: a tool backed by another HTTP service. Failures become tool error results (`isError: true` with a
 * plain sentence) so the model can tell the user or try something else; the service's secret stays server-side.
 */
@Injectable()
export class CustomerLookupService {
  constructor(private readonly directory: CustomerDirectoryClient) {}

  @McpTool({
    name: 'lookup_customer',
    title: 'Look up a customer',
    description: 'Fetches a customer (name and tier) from the customer directory by id.',
    input: CustomerLookupInput,
    output: CustomerOutput,
    annotations: { readOnlyHint: true, openWorldHint: true },
  })
  async lookupCustomer(args: CustomerLookupInput, ctx: ToolContext): Promise<CustomerOutput> {
    const body = await this.directory.getCustomer(args.customerId, ctx.signal, (message) =>
      ctx.log('warning', message, 'lookup_customer'),
    );
    // Only the fields the output schema names reach the model, whatever else the service sends.
    const record = (body ?? {}) as Record<string, unknown>;
    if (typeof record.id !== 'string' || typeof record.name !== 'string') {
      throw new CustomerDirectoryError('The customer directory answered without an id and a name.');
    }
    return {
      id: record.id,
      name: record.name,
      ...(typeof record.tier === 'string' ? { tier: record.tier } : {}),
    };
  }
}
