import { Module } from '@nestjs/common';
import { ApprovalFlowService } from './approval-flow.service.js';
import { RefundLedger } from './refund-ledger.service.js';

/** Example: a person approves through elicitation mid-run (see docs/tool-authoring.md, "Asking the user"). */
@Module({ providers: [ApprovalFlowService, RefundLedger] })
export class ApprovalFlowModule {}
