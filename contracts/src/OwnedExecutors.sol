// SPDX-License-Identifier: MIT
// The owner and executor extension that xgr's XRC-137 and XRC-729 contracts
// share (XRC-137 standard §4.1, XRC-729 standard §5.4): one owner, an
// ordered executor list without duplicates (the owner is implicit and never
// listed), O(1) removal by swapping with the last entry. Revert reasons carry
// the inheriting contract's tag ("XRC137: not owner").
pragma solidity ^0.8.0;

abstract contract OwnedExecutors {
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event ExecutorAdded(address indexed executor);
    event ExecutorRemoved(address indexed executor);

    address public owner;

    address[] private executorList;
    mapping(address => uint256) private execIndex; // position + 1 in executorList

    constructor() {
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
    }

    /// The prefix of this contract's revert reasons, e.g. "XRC137".
    function _tag() internal pure virtual returns (string memory);

    modifier onlyOwner() {
        require(msg.sender == owner, string.concat(_tag(), ": not owner"));
        _;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), string.concat(_tag(), ": zero owner"));
        if (execIndex[newOwner] != 0) {
            _removeExecutor(newOwner);
        }
        address previous = owner;
        owner = newOwner;
        emit OwnershipTransferred(previous, newOwner);
    }

    function addExecutor(address exec) external onlyOwner {
        require(exec != address(0), string.concat(_tag(), ": zero executor"));
        require(exec != owner, string.concat(_tag(), ": owner is implicit"));
        if (execIndex[exec] != 0) {
            return;
        }
        executorList.push(exec);
        execIndex[exec] = executorList.length;
        emit ExecutorAdded(exec);
    }

    function removeExecutor(address exec) external onlyOwner {
        if (execIndex[exec] == 0) {
            return;
        }
        _removeExecutor(exec);
    }

    function getExecutorList() external view returns (address[] memory) {
        return executorList;
    }

    function _removeExecutor(address exec) private {
        uint256 pos = execIndex[exec] - 1;
        uint256 last = executorList.length - 1;
        if (pos != last) {
            address moved = executorList[last];
            executorList[pos] = moved;
            execIndex[moved] = pos + 1;
        }
        executorList.pop();
        delete execIndex[exec];
        emit ExecutorRemoved(exec);
    }
}
