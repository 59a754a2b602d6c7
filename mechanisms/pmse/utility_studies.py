"""(being written: Table 2 / Figure 3 and Section 6 study workloads)"""
